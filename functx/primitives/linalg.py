"""dot_general (filled in below)."""
