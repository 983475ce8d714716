//! The four patch types: JSON patch, merge patch, strategic merge patch, and
//! server-side apply with managedFields. Pure functions over JSON values.
