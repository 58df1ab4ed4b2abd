"""Model protocol and providers."""
