/* posenc dashboard: charts (being written). */
