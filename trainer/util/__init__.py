"""Small helpers with no domain of their own: dates, device, files, JSON and non-finite numbers."""
