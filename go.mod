module smartt

go 1.26
