/* posenc dashboard: api (being written). */
