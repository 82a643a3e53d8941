"""As a user runs it: the installed executable in its own processes."""
