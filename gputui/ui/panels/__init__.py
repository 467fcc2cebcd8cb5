"""The main screen's panels (nvitop's `screens/main/panels/`): each drives its pane's widgets from
the view state (gputui/ui/state.py) and does what its pane's keys ask. The screen composes them."""
