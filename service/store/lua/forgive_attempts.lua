-- uses: forgive
forgive(KEYS[1], 1, #ARGV)
return 1
