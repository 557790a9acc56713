"""The built-in demo: two small models trained from scratch on generated arithmetic."""
