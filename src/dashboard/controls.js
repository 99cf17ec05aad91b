/* posenc dashboard: controls (being written). */
