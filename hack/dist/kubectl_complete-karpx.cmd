@kubectl karpx __complete %*
