"""The executor agent: claims tasks, runs trainers, reports."""
