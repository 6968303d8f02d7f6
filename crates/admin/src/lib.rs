//! The cswitch admin listener: JSON API, Prometheus metrics and the stats page.
