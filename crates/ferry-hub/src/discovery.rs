//! Discovery documents (/api, /apis, group-version resource lists, aggregated discovery v2).
