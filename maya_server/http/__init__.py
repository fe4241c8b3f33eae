"""HTTP concerns shared by every API: auth, errors, SSE, status endpoints."""
