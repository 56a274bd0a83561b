"""HTTP routes, one module per area; each exports ``ENDPOINTS``."""
