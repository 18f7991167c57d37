"""Use cases: each public method is one thing a caller can do, authorised first."""
