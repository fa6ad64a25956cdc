"""The Tinker wire: `/api/v1/` for the official tinker SDK, translated onto ClientService."""
