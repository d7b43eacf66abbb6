"""The chat's views: its pages and forms (pages.py), the streams a browser follows
(streams.py), and the health check (health.py)."""
