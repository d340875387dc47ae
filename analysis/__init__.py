"""Records -> tables, plots and reports. Reads only what runs wrote to disk."""
