"""Pages that summarise across the apps: the home page (datasets, jobs, releases) and the audit
trail (whose access follows the releases a user may read). They sit on top of every app, with the
API and the command line."""
