"""Delivery: the outbox relay, its targets, and the documents it sends.

The relay claims due outbox rows with a lease, sends each to its target, and records the
outcome in one transaction with the run's `delivered` / `delivery_failed` event.

    relay.py       claim due deliveries, send them, record what happened
    policy.py      pure: what an attempt came to, and when to try again
    base.py        what every target is: one `Outgoing` in, an `Attempt` out
    targets.py     `file:`, `exec:`, `none:`, and the target for each URI
    webhook.py     `http(s):`, signed per Standard Webhooks (signing.py)
    slack.py github.py mail.py   Slack, GitHub and SMTP targets; rest.py their JSON calls
    slack_blocks.py   the buttons of a Slack message, and what each carries back
    slack_requests.py what Slack sends back: its signature, a click as an `Interaction`
    github_commands.py  a GitHub webhook's signature and the `/waypost` command it gives
    github_reply.py     an answer's outcome shown in the GitHub thread it came from
    connections.py the kept-alive HTTP connections a relay shares between sends
    document.py    the result document or notice built from the packet
    settings.py    `[delivery]` in waypost.toml, the webhook secret, the CLI's flags
    receiver.py    receiving waypost webhooks: signature, tolerance, each id once
"""
