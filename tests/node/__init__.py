"""Tests that run libauth (Node) as the independent verifier."""
