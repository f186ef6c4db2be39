// Money in osctl's human output, in one format (issue 51): US dollars with a dollar sign, "$12.50", and
// to four places where an amount holds a fraction of a cent, "$0.0295". Every cost, spend, cap and
// price osctl prints goes through here; --json prints the API's numbers as they are.

/**
 * US cents as dollars: "$12.50". Spend and usage may hold fractions of a cent (the daemon counts in
 * millionths of a dollar), shown to four places so a small spend does not read as nothing; one below
 * $0.0001 reads "<$0.0001" rather than "$0.0000".
 */
export function usd(cents: number): string {
  // To the millionth of a dollar the daemon counts in: 0.15 * 100 is 15.000000000000002 in floating
  // point, and a figure read from the wire should not gain a fraction it never had.
  const micros = Math.round(cents * 10_000)
  if (micros === 0) return '$0.00'
  const sign = micros < 0 ? '-' : ''
  const size = Math.abs(micros)
  if (size < 100) return `${sign}<$0.0001`
  return `${sign}$${(size / 1_000_000).toFixed(size % 10_000 === 0 ? 2 : 4)}`
}

/** US dollars (a price per million tokens, a per-run limit) in the same format: "$3.00", "$0.0750". */
export function usdFromDollars(amount: number): string {
  return usd(amount * 100)
}

/**
 * A cost as usd() writes it, and "unpriced" where model calls in it had no price (issue 51: a model
 * neither listed nor priced, served from an address the operator set): those count $0.
 */
export function cost(cents: number, unpriced: boolean | undefined): string {
  if (!unpriced) return usd(cents)
  return cents === 0 ? 'unpriced' : `${usd(cents)} + unpriced`
}
