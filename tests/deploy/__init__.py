"""Checks of the deployment files against the code."""
