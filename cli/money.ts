/**
 * US cents as dollars: "$12.50". Spend and usage may hold fractions of a cent (they are counted in
 * millionths of a dollar), shown to four places so a small spend does not read as nothing.
 */
export function usd(cents: number): string {
  const whole = Number.isInteger(cents)
  return `$${(cents / 100).toFixed(whole ? 2 : 4)}`
}
