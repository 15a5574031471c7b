"""Host implementations of sorting and selection indices (filled in below)."""
