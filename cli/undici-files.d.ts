// The files of undici that cli/http.ts loads in place of its index (which loads all of undici).
declare module 'undici/lib/dispatcher/dispatcher.js' {
  const Dispatcher: { prototype: object }
  export default Dispatcher
}
declare module 'undici/lib/api/index.js' {
  const api: Record<string, unknown>
  export default api
}
declare module 'undici/lib/global.js' {
  const global: { getGlobalDispatcher(): import('undici').Dispatcher }
  export default global
}
