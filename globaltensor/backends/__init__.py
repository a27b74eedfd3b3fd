"""Device backends: what a placement type needs from its device (today: cuda's driver probe)."""
