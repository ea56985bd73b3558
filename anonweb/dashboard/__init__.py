"""The home page: a summary across every app (datasets, jobs, releases), so it sits on top of
them all, with the API and the command line."""
