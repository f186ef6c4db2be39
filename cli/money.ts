/**
 * US cents as dollars: "$12.50". Spend and usage may hold fractions of a cent (they are counted in
 * millionths of a dollar), shown to four places so a small spend does not read as nothing.
 */
export function usd(cents: number): string {
  const whole = Number.isInteger(cents)
  return `$${(cents / 100).toFixed(whole ? 2 : 4)}`
}

/**
 * A cost as usd() writes it, and "unpriced" where model calls in it had no price (issue 51: a model
 * neither listed nor priced, served from an address the operator set): those count $0.
 */
export function cost(cents: number, unpriced: boolean | undefined): string {
  if (!unpriced) return usd(cents)
  return cents === 0 ? 'unpriced' : `${usd(cents)} + unpriced`
}
