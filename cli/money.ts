// Money in osctl's human output (issue 51): every cost, spend, cap and price osctl prints goes through
// here, in the one format shared/money.ts writes ("$0.0295"); --json prints the API's numbers as they are.

import { usd } from '../shared/money.js'
export { usd, usdFromDollars } from '../shared/money.js'

/**
 * A cost as usd() writes it, and "unpriced" where model calls in it had no price (issue 51: a model
 * neither listed nor priced, served from an address the operator set): those count $0.
 */
export function cost(cents: number, unpriced: boolean | undefined): string {
  if (!unpriced) return usd(cents)
  return cents === 0 ? 'unpriced' : `${usd(cents)} + unpriced`
}
