-- delay(): 20 ms before each request, so each connection sends at most
-- 50 requests a second.
function delay()
  return 20
end
