"""Engine servers posttrain starts, watches, routes across and updates: processes, not protocol."""
