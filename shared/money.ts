// Money as a person reads it, in one format (issue 51): US dollars with a dollar sign, "$12.50", to four
// places where an amount holds a fraction of a cent, "$0.0295". osctl writes every cost, spend, cap and
// price with it (cli/money.ts), and the daemon the amounts in its own words (a run's reason, a chat's
// notice), so a cap reads the same in `osctl spend` and in the chat screen. A leaf: it imports nothing.

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
