"""What every service shares: config, store, auth, errors, ids, page tokens, lifecycle, audit."""
