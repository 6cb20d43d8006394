"""REST endpoints, one module per resource."""
