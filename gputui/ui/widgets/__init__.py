"""Widgets of the main screen; each renders state it is given and reads nothing itself."""
