/* posenc dashboard: heatmap (being written). */
