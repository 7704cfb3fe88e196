graph [
  node [
    id 0
    label "London,+UnitedKingdom209"
  ]
  node [
    id 1
    label "London,+UnitedKingdom289"
  ]
  node [
    id 2
    label "New+York,+NY239"
  ]
  node [
    id 3
    label "Amsterdam,+Netherlands227"
  ]
  node [
    id 4
    label "Bracknell,+UnitedKingdom278"
  ]
  node [
    id 5
    label "London,+UnitedKingdom201"
  ]
  node [
    id 6
    label "Bracknell,+UnitedKingdom279"
  ]
  node [
    id 7
    label "London,+UnitedKingdom293"
  ]
  node [
    id 8
    label "Paris,+France193"
  ]
  node [
    id 9
    label "London,+UnitedKingdom287"
  ]
  node [
    id 10
    label "London,+UnitedKingdom288"
  ]
  node [
    id 11
    label "Copenhagen,+Denmark179"
  ]
  node [
    id 12
    label "Manchester,+UnitedKingdom177"
  ]
  node [
    id 13
    label "Stockholm,+Sweden231"
  ]
  node [
    id 14
    label "Copenhagen,+Denmark182"
  ]
  node [
    id 15
    label "Copenhagen,+Denmark271"
  ]
  node [
    id 16
    label "Copenhagen,+Denmark272"
  ]
  node [
    id 17
    label "New+York,+NY240"
  ]
  node [
    id 18
    label "London,+UnitedKingdom207"
  ]
  node [
    id 19
    label "London,+UnitedKingdom208"
  ]
  node [
    id 20
    label "Munich,+Germany266"
  ]
  node [
    id 21
    label "Munich,+Germany267"
  ]
  node [
    id 22
    label "Hamburg,+Germany264"
  ]
  node [
    id 23
    label "Dusseldorf,+Germany261"
  ]
  node [
    id 24
    label "Berlin,+Germany162"
  ]
  node [
    id 25
    label "Vienna,+Austria129"
  ]
  node [
    id 26
    label "Vienna,+Austria242"
  ]
  node [
    id 27
    label "Dusseldorf,+Germany260"
  ]
  node [
    id 28
    label "Munich,+Germany176"
  ]
  node [
    id 29
    label "Vienna,+Austria126"
  ]
  node [
    id 30
    label "Brussels,+Belgium135"
  ]
  node [
    id 31
    label "Brussels,+Belgium247"
  ]
  node [
    id 32
    label "Brussels,+Belgium136"
  ]
  node [
    id 33
    label "Brussels,+Belgium246"
  ]
  node [
    id 34
    label "London,+UnitedKingdom291"
  ]
  node [
    id 35
    label "Dusseldorf,+Germany164"
  ]
  node [
    id 36
    label "Frankfurt,+Germany263"
  ]
  node [
    id 37
    label "Frankfurt,+Germany168"
  ]
  node [
    id 38
    label "Geneva,+Switzerland250"
  ]
  node [
    id 39
    label "Dusseldorf,+Germany163"
  ]
  node [
    id 40
    label "Frankfurt,+Germany170"
  ]
  node [
    id 41
    label "Frankfurt,+Germany166"
  ]
  node [
    id 42
    label "Frankfurt,+Germany169"
  ]
  node [
    id 43
    label "Geneva,+Switzerland144"
  ]
  node [
    id 44
    label "Geneva,+Switzerland145"
  ]
  node [
    id 45
    label "Geneva,+Switzerland146"
  ]
  node [
    id 46
    label "Paris,+France196"
  ]
  node [
    id 47
    label "Antwerp,+Belgium244"
  ]
  node [
    id 48
    label "Copenhagen,+Denmark181"
  ]
  node [
    id 49
    label "Copenhagen,+Denmark183"
  ]
  node [
    id 50
    label "Rome,+Italy222"
  ]
  node [
    id 51
    label "Milan,+Italy221"
  ]
  node [
    id 52
    label "Berlin,+Germany160"
  ]
  node [
    id 53
    label "Berlin,+Germany161"
  ]
  node [
    id 54
    label "Berlin,+Germany259"
  ]
  node [
    id 55
    label "Stockholm,+Sweden232"
  ]
  node [
    id 56
    label "Prague,+CzechRepublic155"
  ]
  node [
    id 57
    label "Geneva,+Switzerland139"
  ]
  node [
    id 58
    label "Milan,+Italy220"
  ]
  node [
    id 59
    label "Stockholm,+Sweden302"
  ]
  node [
    id 60
    label "Stockholm,+Sweden303"
  ]
  node [
    id 61
    label "Copenhagen,+Denmark270"
  ]
  node [
    id 62
    label "Stockholm,+Sweden304"
  ]
  node [
    id 63
    label "Amsterdam,+Netherlands297"
  ]
  node [
    id 64
    label "Amsterdam,+Netherlands298"
  ]
  node [
    id 65
    label "Rotterdam,+Netherlands299"
  ]
  node [
    id 66
    label "Geneva,+Switzerland140"
  ]
  node [
    id 67
    label "Bratislava,+Slovakia236"
  ]
  node [
    id 68
    label "Bratislava,+Slovakia237"
  ]
  node [
    id 69
    label "Prague,+CzechRepublic157"
  ]
  node [
    id 70
    label "Geneva,+Switzerland141"
  ]
  node [
    id 71
    label "Geneva,+Switzerland142"
  ]
  node [
    id 72
    label "Vienna,+Austria123"
  ]
  node [
    id 73
    label "Vienna,+Austria124"
  ]
  node [
    id 74
    label "Geneva,+Switzerland143"
  ]
  node [
    id 75
    label "Milan,+Italy219"
  ]
  node [
    id 76
    label "Milan,+Italy217"
  ]
  node [
    id 77
    label "Milan,+Italy218"
  ]
  node [
    id 78
    label "London,+UnitedKingdom200"
  ]
  node [
    id 79
    label "Vienna,+Austria125"
  ]
  node [
    id 80
    label "Rotterdam,+Netherlands228"
  ]
  node [
    id 81
    label "Antwerp,+Belgium243"
  ]
  node [
    id 82
    label "Vienna,+Austria130"
  ]
  node [
    id 83
    label "Barcelona,+Spain273"
  ]
  node [
    id 84
    label "Hamburg,+Germany265"
  ]
  node [
    id 85
    label "Vienna,+Austria241"
  ]
  node [
    id 86
    label "Antwerp,+Belgium137"
  ]
  edge [
    source 0
    target 1
    distance 0.0
  ]
  edge [
    source 0
    target 2
    distance 5585.2523724107405
  ]
  edge [
    source 0
    target 3
    distance 358.40050051031875
  ]
  edge [
    source 0
    target 4
    distance 45.29769609847814
  ]
  edge [
    source 0
    target 5
    distance 0.0
  ]
  edge [
    source 0
    target 6
    distance 45.29769609847814
  ]
  edge [
    source 0
    target 7
    distance 0.0
  ]
  edge [
    source 0
    target 8
    distance 343.87368318399024
  ]
  edge [
    source 0
    target 9
    distance 0.0
  ]
  edge [
    source 0
    target 10
    distance 0.0
  ]
  edge [
    source 1
    target 10
    distance 0.0
  ]
  edge [
    source 1
    target 4
    distance 45.29769609847814
  ]
  edge [
    source 1
    target 6
    distance 45.29769609847814
  ]
  edge [
    source 1
    target 19
    distance 0.0
  ]
  edge [
    source 2
    target 17
    distance 0.0
  ]
  edge [
    source 2
    target 18
    distance 5585.2523724107405
  ]
  edge [
    source 2
    target 19
    distance 5585.2523724107405
  ]
  edge [
    source 3
    target 32
    distance 173.90384613659498
  ]
  edge [
    source 3
    target 39
    distance 182.10194095251893
  ]
  edge [
    source 3
    target 42
    distance 365.048785326527
  ]
  edge [
    source 3
    target 80
    distance 58.08379836073154
  ]
  edge [
    source 3
    target 18
    distance 358.40050051031875
  ]
  edge [
    source 3
    target 19
    distance 358.40050051031875
  ]
  edge [
    source 4
    target 9
    distance 45.29769609847814
  ]
  edge [
    source 4
    target 34
    distance 45.29769609847814
  ]
  edge [
    source 5
    target 34
    distance 0.0
  ]
  edge [
    source 5
    target 7
    distance 0.0
  ]
  edge [
    source 5
    target 78
    distance 0.0
  ]
  edge [
    source 5
    target 18
    distance 0.0
  ]
  edge [
    source 5
    target 46
    distance 343.87368318399024
  ]
  edge [
    source 6
    target 34
    distance 45.29769609847814
  ]
  edge [
    source 6
    target 7
    distance 45.29769609847814
  ]
  edge [
    source 6
    target 78
    distance 45.29769609847814
  ]
  edge [
    source 7
    target 18
    distance 0.0
  ]
  edge [
    source 7
    target 19
    distance 0.0
  ]
  edge [
    source 8
    target 30
    distance 263.9414346297288
  ]
  edge [
    source 8
    target 57
    distance 410.7531371481551
  ]
  edge [
    source 8
    target 17
    distance 5852.886744136188
  ]
  edge [
    source 8
    target 66
    distance 410.7531371481551
  ]
  edge [
    source 8
    target 70
    distance 410.7531371481551
  ]
  edge [
    source 8
    target 71
    distance 410.7531371481551
  ]
  edge [
    source 8
    target 74
    distance 410.7531371481551
  ]
  edge [
    source 8
    target 18
    distance 343.87368318399024
  ]
  edge [
    source 8
    target 46
    distance 0.0
  ]
  edge [
    source 8
    target 19
    distance 343.87368318399024
  ]
  edge [
    source 9
    target 34
    distance 0.0
  ]
  edge [
    source 9
    target 19
    distance 0.0
  ]
  edge [
    source 10
    target 12
    distance 262.35674108226357
  ]
  edge [
    source 10
    target 34
    distance 0.0
  ]
  edge [
    source 11
    target 12
    distance 986.7810514672525
  ]
  edge [
    source 11
    target 13
    distance 522.0769233264602
  ]
  edge [
    source 11
    target 14
    distance 0.0
  ]
  edge [
    source 11
    target 15
    distance 0.0
  ]
  edge [
    source 11
    target 16
    distance 0.0
  ]
  edge [
    source 12
    target 48
    distance 986.7810514672525
  ]
  edge [
    source 12
    target 14
    distance 986.7810514672525
  ]
  edge [
    source 12
    target 15
    distance 986.7810514672525
  ]
  edge [
    source 12
    target 49
    distance 986.7810514672525
  ]
  edge [
    source 12
    target 39
    distance 663.3087904311211
  ]
  edge [
    source 13
    target 60
    distance 0.0
  ]
  edge [
    source 13
    target 55
    distance 0.0
  ]
  edge [
    source 15
    target 59
    distance 522.0769233264602
  ]
  edge [
    source 15
    target 62
    distance 522.0769233264602
  ]
  edge [
    source 15
    target 61
    distance 0.0
  ]
  edge [
    source 16
    target 62
    distance 522.0769233264602
  ]
  edge [
    source 20
    target 21
    distance 0.0
  ]
  edge [
    source 20
    target 22
    distance 611.4470385631118
  ]
  edge [
    source 20
    target 23
    distance 487.59260997892295
  ]
  edge [
    source 21
    target 24
    distance 503.98169486969493
  ]
  edge [
    source 21
    target 25
    distance 356.8202498271311
  ]
  edge [
    source 21
    target 26
    distance 356.8202498271311
  ]
  edge [
    source 21
    target 27
    distance 487.59260997892295
  ]
  edge [
    source 21
    target 28
    distance 0.0
  ]
  edge [
    source 21
    target 29
    distance 356.8202498271311
  ]
  edge [
    source 22
    target 27
    distance 339.0830119214683
  ]
  edge [
    source 22
    target 23
    distance 339.0830119214683
  ]
  edge [
    source 22
    target 84
    distance 0.0
  ]
  edge [
    source 23
    target 27
    distance 0.0
  ]
  edge [
    source 23
    target 35
    distance 0.0
  ]
  edge [
    source 23
    target 39
    distance 0.0
  ]
  edge [
    source 24
    target 52
    distance 0.0
  ]
  edge [
    source 24
    target 53
    distance 0.0
  ]
  edge [
    source 25
    target 72
    distance 0.0
  ]
  edge [
    source 25
    target 79
    distance 0.0
  ]
  edge [
    source 25
    target 82
    distance 0.0
  ]
  edge [
    source 26
    target 29
    distance 0.0
  ]
  edge [
    source 26
    target 54
    distance 524.0811741028135
  ]
  edge [
    source 27
    target 35
    distance 0.0
  ]
  edge [
    source 27
    target 36
    distance 183.10357972376826
  ]
  edge [
    source 27
    target 37
    distance 183.10357972376826
  ]
  edge [
    source 27
    target 38
    distance 560.5627089717792
  ]
  edge [
    source 27
    target 39
    distance 0.0
  ]
  edge [
    source 28
    target 40
    distance 304.5360201551259
  ]
  edge [
    source 28
    target 79
    distance 356.8202498271311
  ]
  edge [
    source 29
    target 72
    distance 0.0
  ]
  edge [
    source 29
    target 79
    distance 0.0
  ]
  edge [
    source 29
    target 54
    distance 524.0811741028135
  ]
  edge [
    source 29
    target 82
    distance 0.0
  ]
  edge [
    source 30
    target 31
    distance 0.0
  ]
  edge [
    source 30
    target 32
    distance 0.0
  ]
  edge [
    source 30
    target 33
    distance 0.0
  ]
  edge [
    source 31
    target 32
    distance 0.0
  ]
  edge [
    source 31
    target 47
    distance 41.804427254041734
  ]
  edge [
    source 32
    target 33
    distance 0.0
  ]
  edge [
    source 33
    target 47
    distance 41.804427254041734
  ]
  edge [
    source 35
    target 52
    distance 477.37170529187216
  ]
  edge [
    source 35
    target 39
    distance 0.0
  ]
  edge [
    source 35
    target 42
    distance 183.10357972376826
  ]
  edge [
    source 36
    target 40
    distance 0.0
  ]
  edge [
    source 36
    target 41
    distance 0.0
  ]
  edge [
    source 36
    target 42
    distance 0.0
  ]
  edge [
    source 37
    target 40
    distance 0.0
  ]
  edge [
    source 37
    target 41
    distance 0.0
  ]
  edge [
    source 37
    target 42
    distance 0.0
  ]
  edge [
    source 40
    target 41
    distance 0.0
  ]
  edge [
    source 40
    target 42
    distance 0.0
  ]
  edge [
    source 40
    target 43
    distance 473.7406026620935
  ]
  edge [
    source 40
    target 44
    distance 473.7406026620935
  ]
  edge [
    source 40
    target 45
    distance 473.7406026620935
  ]
  edge [
    source 40
    target 46
    distance 479.27934756794303
  ]
  edge [
    source 41
    target 42
    distance 0.0
  ]
  edge [
    source 43
    target 57
    distance 0.0
  ]
  edge [
    source 43
    target 66
    distance 0.0
  ]
  edge [
    source 43
    target 75
    distance 250.18436924032753
  ]
  edge [
    source 43
    target 76
    distance 250.18436924032753
  ]
  edge [
    source 43
    target 77
    distance 250.18436924032753
  ]
  edge [
    source 44
    target 66
    distance 0.0
  ]
  edge [
    source 44
    target 75
    distance 250.18436924032753
  ]
  edge [
    source 45
    target 57
    distance 0.0
  ]
  edge [
    source 45
    target 70
    distance 0.0
  ]
  edge [
    source 45
    target 71
    distance 0.0
  ]
  edge [
    source 45
    target 76
    distance 250.18436924032753
  ]
  edge [
    source 45
    target 77
    distance 250.18436924032753
  ]
  edge [
    source 46
    target 86
    distance 301.12820169530966
  ]
  edge [
    source 47
    target 81
    distance 0.0
  ]
  edge [
    source 50
    target 51
    distance 477.5208467748804
  ]
  edge [
    source 51
    target 58
    distance 0.0
  ]
  edge [
    source 52
    target 53
    distance 0.0
  ]
  edge [
    source 52
    target 54
    distance 0.0
  ]
  edge [
    source 53
    target 55
    distance 812.0818733665999
  ]
  edge [
    source 53
    target 56
    distance 279.716492174776
  ]
  edge [
    source 55
    target 59
    distance 0.0
  ]
  edge [
    source 56
    target 67
    distance 291.2472458498337
  ]
  edge [
    source 56
    target 68
    distance 291.2472458498337
  ]
  edge [
    source 56
    target 69
    distance 0.0
  ]
  edge [
    source 57
    target 58
    distance 250.18436924032753
  ]
  edge [
    source 58
    target 66
    distance 250.18436924032753
  ]
  edge [
    source 59
    target 60
    distance 0.0
  ]
  edge [
    source 60
    target 61
    distance 522.0769233264602
  ]
  edge [
    source 63
    target 64
    distance 0.0
  ]
  edge [
    source 63
    target 65
    distance 58.08379836073154
  ]
  edge [
    source 64
    target 65
    distance 58.08379836073154
  ]
  edge [
    source 65
    target 80
    distance 0.0
  ]
  edge [
    source 65
    target 81
    distance 78.2040344180888
  ]
  edge [
    source 69
    target 72
    distance 252.83832253951033
  ]
  edge [
    source 69
    target 73
    distance 252.83832253951033
  ]
  edge [
    source 72
    target 79
    distance 0.0
  ]
  edge [
    source 73
    target 82
    distance 0.0
  ]
  edge [
    source 77
    target 83
    distance 726.41538789814
  ]
  edge [
    source 79
    target 82
    distance 0.0
  ]
  edge [
    source 84
    target 85
    distance 742.9090550792507
  ]
]
