"""Where rows are read: engines that turn a table into a histogram, and write releases."""
