"""CLI verbs that live in their own modules, loaded only when called
(see cli_click.LAZY_COMMANDS)."""
