"""Support chat: a simulated customer, typed tools and a judge that reads the whole transcript."""
