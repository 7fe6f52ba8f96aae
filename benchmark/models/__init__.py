"""Backbone registry and the body/head classifier used by every method."""
