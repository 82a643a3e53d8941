"""A public alias: webhook receiving as the README names it (`from waypost.receiver import
Message, Receiver`). It lives in `waypost.delivery.receiver`."""

from waypost.delivery.receiver import (
    DEFAULT_MAX_BODY,
    DEFAULT_RETENTION,
    DEFAULT_TOLERANCE,
    Message,
    Receiver,
    WebhookRejected,
    WebhookTooLarge,
)

__all__ = ["DEFAULT_MAX_BODY", "DEFAULT_RETENTION", "DEFAULT_TOLERANCE", "Message", "Receiver",
           "WebhookRejected", "WebhookTooLarge"]
