package handlers

// RouteAuth returns who may call each route of the table, by "METHOD
// path" (HEAD too, for a GET route), as the table declares it.
func RouteAuth() map[string]string {
	out := make(map[string]string, 2*len(routes))
	for _, rt := range routes {
		out[rt.method+" "+rt.path] = rt.auth.String()
		if rt.method == "GET" {
			out["HEAD "+rt.path] = rt.auth.String()
		}
	}
	return out
}
