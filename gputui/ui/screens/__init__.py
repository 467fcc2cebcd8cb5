"""Screens: the main dashboard and the help screen."""
