// Who calls: what auth.ts learns from the bearer token, kept by the token cache (caches.ts) and carried
// by every request (context.ts, which holds the caches).

/** What a request learns about its caller from the bearer token (spec: Authentication). */
export interface Caller {
  tokenId: string
  enterpriseId: string
  scopes: ReadonlySet<string>
}
