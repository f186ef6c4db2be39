//
// Named exports (issue 43): what code outside the concept uses, by who uses it; the rest is the
// concept's own.

// For the API (routes and http/).
export {
  listCatalogTasks,
  getCatalogTask,
  cloneCatalogTask,
  copyCatalogTask,
  listCatalogRoles,
  getCatalogRole,
  cloneCatalogRole,
} from './catalog.js'

// For the daemon and the operator commands.
export { type Published } from './catalog.js'

// For the daemon and the operator commands and tests and benches.
export { publish, unpublish } from './catalog.js'
export { loadServiceCatalog } from './files.js'

// For tests and benches.
export { readCatalogFiles, checkServiceTask, catalogDir } from './files.js'
