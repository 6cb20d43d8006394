"""The inventory: where crafted tools live, and the memory rules that move them between tiers."""
