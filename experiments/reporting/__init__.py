"""Reporting: the claim table of `attnrank check` and the sweep report of `attnrank report`."""
