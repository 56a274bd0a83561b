"""Business rules, free of HTTP: each module owns one kind of object and its rows."""
